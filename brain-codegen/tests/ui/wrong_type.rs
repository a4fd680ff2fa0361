#[path = "../snapshots/names/mod.rs"]
mod generated;

fn main() {
    let _ = generated::get_page::GetPageArgs { url: 5 };
}

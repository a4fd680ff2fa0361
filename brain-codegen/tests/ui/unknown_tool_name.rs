#[path = "../snapshots/names/mod.rs"]
mod generated;

fn main() {
    let _ = generated::ToolName::GetPages;
}

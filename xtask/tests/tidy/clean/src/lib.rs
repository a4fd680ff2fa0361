mod a;
mod b;
#[path = "elsewhere/thing.rs"]
mod thing;

pub use self::a::A;
pub use thing::Thing;

mod inline {
    pub fn f() -> super::a::A {
        super::a::A
    }
}

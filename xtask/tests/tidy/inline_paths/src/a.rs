pub const NAME: &str = "a";

pub fn f() -> u32 {
    crate::b::g() + 1
}

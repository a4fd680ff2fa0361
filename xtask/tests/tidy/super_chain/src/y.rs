pub fn g() -> u32 {
    crate::x::inner::f() + 1
}

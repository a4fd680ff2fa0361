pub fn f() -> u32 {
    super::super::y::g()
}

use crate::a::A;

pub struct B;

pub fn g() -> u32 {
    1
}

pub fn a() -> A {
    A::new()
}

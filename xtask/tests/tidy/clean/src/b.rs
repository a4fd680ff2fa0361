use crate::a::A;

pub fn a() -> A {
    A
}

pub mod inner {
    pub fn a() -> crate::a::A {
        crate::a::A
    }
}

use crate::{b::B, c::C};

pub struct A(pub B, pub C);

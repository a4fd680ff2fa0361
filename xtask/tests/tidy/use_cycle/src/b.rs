//! Names `a` back.

use super::a::A;

pub struct B;

pub fn a() -> Option<A> {
    None
}

pub struct Thing(pub crate::a::A);

pub fn make() -> Thing {
    use crate::{a::A, b};
    b::a();
    Thing(A)
}

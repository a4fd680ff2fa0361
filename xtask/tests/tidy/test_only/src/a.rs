pub struct A;

#[cfg(test)]
use crate::b::B;

impl A {
    #[cfg(test)]
    pub fn b() -> crate::b::B {
        crate::b::B
    }

    pub fn new() -> Self {
        #[cfg(test)]
        let _ = crate::b::g();
        A
    }
}

#[cfg(all(test, unix))]
pub fn helper() -> u32 {
    crate::b::g()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::b::g;
}

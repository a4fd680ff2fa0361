pub struct A;

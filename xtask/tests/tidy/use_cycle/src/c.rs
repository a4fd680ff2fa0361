pub struct C;

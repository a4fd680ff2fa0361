pub struct Pipe(pub usize);

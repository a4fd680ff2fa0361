mod x;
mod y;

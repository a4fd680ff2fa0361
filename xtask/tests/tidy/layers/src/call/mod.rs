mod retry;

pub use retry::retry;

mod grant;
mod metadata;

pub use grant::Grant;

pub struct Secret(pub String);

/// A grant, with the secret its parent defines.
pub struct Grant {
    pub secret: super::Secret,
    pub url: String,
}

pub fn split(grant: &Grant) -> (String, String) {
    super::metadata::split_url(&grant.url)
}

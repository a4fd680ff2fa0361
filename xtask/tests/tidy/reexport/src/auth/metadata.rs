pub fn split_url(url: &str) -> (String, String) {
    let (a, b) = url.split_once('/').unwrap_or((url, ""));
    (a.to_owned(), b.to_owned())
}

pub fn g() -> u32 {
    1
}

/// Formats crate::a::NAME (a comment or a string is no edge: "crate::a::NAME").
pub fn h() -> String {
    format!("{}", crate::a::NAME)
}

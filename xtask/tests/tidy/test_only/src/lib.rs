mod a;
mod b;
#[cfg(test)]
mod only_in_tests;

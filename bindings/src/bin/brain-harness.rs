//! brain-harness: list the bindings, or call one and print its events.

fn main() -> std::process::ExitCode {
    bindings::harness::main()
}

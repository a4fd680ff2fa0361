mod call;
mod transport;

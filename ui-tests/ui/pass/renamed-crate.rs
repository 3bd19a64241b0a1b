// The runtime under another name: `crate = "..."` points the generated code at it.
extern crate replicate as rep;

mod reexport {
    pub use rep::*;
}

#[derive(rep::Replicated)]
#[net(crate = "rep")]
struct Door {
    open: bool,
}

#[derive(rep::Replicated)]
#[net(crate = "crate::reexport")]
struct Lever {
    #[net(bits = 3)]
    position: u8,
}

#[derive(rep::NetEnum)]
#[net(crate = "rep")]
enum Colour {
    Red,
    Green,
}

fn main() {
    use rep::Replicated as _;
    let _ = Door::descriptor();
    let _ = Lever::descriptor();
    let _ = Colour::Red;
    let _ = Colour::Green;
}

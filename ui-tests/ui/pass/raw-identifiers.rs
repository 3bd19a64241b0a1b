#![allow(non_camel_case_types)]

use replicate::{NetEnum, Replicated};

#[derive(Replicated)]
struct r#Match {
    r#type: u8,
    #[net(notify = r#fn)]
    r#loop: bool,
    r#enum: r#Kind,
}

impl r#Match {
    fn r#fn(&mut self, _old: &bool) {}
}

#[derive(NetEnum, PartialEq)]
enum r#Kind {
    r#struct,
    r#impl { r#move: u8 },
}

fn main() {
    let d = <r#Match as Replicated>::descriptor();
    assert_eq!(d.name, "Match");
    assert_eq!(d.members[0].name, "type");
    let _ = (r#Kind::r#struct, r#Kind::r#impl { r#move: 1 });
}

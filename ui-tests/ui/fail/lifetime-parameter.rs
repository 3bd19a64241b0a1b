use replicate::Replicated;

#[derive(Replicated)]
struct Named<'a> {
    name: &'a str,
}

fn main() {}

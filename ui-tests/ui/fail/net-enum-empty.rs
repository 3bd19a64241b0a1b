use replicate::NetEnum;

#[derive(NetEnum)]
enum Never {}

fn main() {}

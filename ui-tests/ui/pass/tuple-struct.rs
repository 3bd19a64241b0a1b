use replicate::Replicated;

#[derive(Replicated)]
struct Position(#[net(bits = 12)] u16, #[net(skip)] u32, i32);

#[derive(Replicated)]
struct Marker;

fn main() {
    let d = <Position as Replicated>::descriptor();
    assert_eq!(d.members.len(), 2);
    assert_eq!(d.members[1].name, "2");
    let p = Position::from_state(&Position(1, 2, 3).to_state());
    assert_eq!((p.0, p.1, p.2), (1, 0, 3));
    assert_eq!(<Marker as Replicated>::descriptor().change_mask_bits, 0);
}

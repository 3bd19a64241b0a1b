//! A generic replicated type registered for two instantiations with
//! `replicate::register!`: each gets its own wire name and protocol id, both spawn on
//! the server and replicate to a client; an unregistered instantiation is refused with
//! a message that says how to register it.

use replicate::transport::LinkConditioner;
use replicate::transport::memory::MemoryServerTransport;
use replicate::{Client, ClientConfig, ProtocolRegistry, Replicated, Server, ServerConfig};
use std::sync::Arc;
use std::time::Duration;

#[derive(Replicated, Debug, Default, Clone, PartialEq)]
#[net(name = "derive_generic::Tagged")]
struct Tagged<T: Send + 'static> {
    #[net(bits = 4)]
    tag: u8,
    value: T,
}

replicate::register!(Tagged<u32>, Tagged<String>);

#[test]
fn instantiations_have_their_own_names_and_ids() {
    let a = <Tagged<u32> as Replicated>::descriptor();
    let b = <Tagged<String> as Replicated>::descriptor();
    assert_eq!(a.name, "derive_generic::Tagged<u32>");
    assert!(b.name.starts_with("derive_generic::Tagged<") && b.name.contains("String"));
    assert_ne!(a.protocol_id, b.protocol_id);
    let registry = ProtocolRegistry::from_inventory().unwrap();
    assert!(registry.index_of::<Tagged<u32>>().is_some());
    assert!(registry.index_of::<Tagged<String>>().is_some());
    assert!(registry.index_of::<Tagged<u16>>().is_none());
}

#[test]
fn both_instantiations_spawn_and_replicate() {
    let registry = Arc::new(ProtocolRegistry::from_inventory().unwrap());
    let transport = MemoryServerTransport::with_limits(LinkConditioner::perfect(), 3, 1200, 4);
    let network = transport.network();
    let mut server = Server::new(transport, registry.clone(), ServerConfig::default()).unwrap();
    let mut client = Client::new(network.connect(&[]), registry, ClientConfig::default()).unwrap();

    let n = server
        .spawn(Tagged::<u32> {
            tag: 3,
            value: 70_000,
        })
        .unwrap();
    let s = server
        .spawn(Tagged::<String> {
            tag: 9,
            value: "hello".into(),
        })
        .unwrap();
    // Not registered: refused, with the way to register it.
    let err = server.spawn(Tagged::<u16>::default()).unwrap_err();
    let text = err.to_string();
    assert!(text.contains("replicate::register!"), "{text}");

    let mut now = Duration::ZERO;
    for tick in 0..300 {
        now += Duration::from_millis(16);
        if tick == 100 {
            server
                .get_mut::<Tagged<String>>(s)
                .unwrap()
                .value
                .push_str(", world");
            server.get_mut::<Tagged<u32>>(n).unwrap().tag = 15;
        }
        server.tick(now).unwrap();
        client.tick(now).unwrap();
        let _ = client.events();
    }
    assert_eq!(
        client.get::<Tagged<u32>>(n),
        Some(&Tagged {
            tag: 15,
            value: 70_000
        })
    );
    assert_eq!(
        client.get::<Tagged<String>>(s),
        Some(&Tagged {
            tag: 9,
            value: "hello, world".to_string()
        })
    );
}

//! Throughput of the pieces every listing goes through: the `# simple`
//! parser, and the JSON and human writers. `bench/run.sh` runs the
//! end-to-end comparisons; these isolate ral's own code.

use std::hint::black_box;
use std::path::Path;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use ral::invoke::simple::ListParser;
use ral::metadata::Metadata;
use ral::provider::Provider;
use ral::render::{human, json};
use ral::resource::Resource;
use ral::types::Value;

const RESOURCES: usize = 10_000;

/// `# simple` output like bench/providers/many.prov's.
fn simple_output() -> String {
    let mut text = String::from("# simple\n");
    for i in 0..RESOURCES {
        text.push_str(&format!(
            "name: r{i}\nip: 10.0.{}.{}\nhost_aliases: a{i} 'b {i}'\nenabled: true\n",
            i % 256,
            i % 250
        ));
    }
    text
}

fn provider() -> Provider {
    let yaml = "---\nprovider:\n  type: many\n  invoke: simple\n  actions: [list]\n  suitable: true\n  desc: bench\n  attributes:\n    name: {}\n    ip: {}\n    host_aliases: {type: \"array[string]\"}\n    enabled: {type: boolean}\n";
    let meta = Metadata::parse(yaml, Path::new("many.yaml")).unwrap();
    Provider::new(meta, "many.prov".into(), None)
}

fn resources() -> Vec<Resource> {
    (0..RESOURCES)
        .map(|i| {
            let mut attrs = ral::types::AttrMap::default();
            attrs.insert(
                "ip".to_owned(),
                Value::String(format!("10.0.{}.{}", i % 256, i % 250)),
            );
            attrs.insert(
                "host_aliases".to_owned(),
                Value::Array(vec![
                    Value::String(format!("a{i}")),
                    Value::String(format!("b {i}")),
                ]),
            );
            attrs.insert("enabled".to_owned(), Value::Bool(true));
            Resource {
                name: format!("r{i}"),
                attrs,
            }
        })
        .collect()
}

fn parse_simple(c: &mut Criterion) {
    let text = simple_output();
    let mut group = c.benchmark_group("simple_parser");
    group.throughput(Throughput::Bytes(text.len() as u64));
    group.bench_function("list_10k_resources", |b| {
        b.iter(|| {
            let mut parser = ListParser::default();
            let mut count = 0;
            for line in text.lines() {
                if parser.feed(black_box(line)).unwrap().is_some() {
                    count += 1;
                }
            }
            count += usize::from(parser.finish().unwrap().is_some());
            assert_eq!(count, RESOURCES);
        })
    });
    group.finish();
}

fn write_outputs(c: &mut Criterion) {
    let provider = provider();
    let resources = resources();
    let mut group = c.benchmark_group("writers");
    group.throughput(Throughput::Elements(RESOURCES as u64));
    group.bench_function("json_stream_10k_resources", |b| {
        b.iter(|| {
            let mut out = Vec::with_capacity(1 << 20);
            let mut stream = json::ResourceStream::new(&mut out, &provider);
            for resource in &resources {
                stream.push(resource).unwrap();
            }
            stream.finish(None).unwrap();
            black_box(out.len())
        })
    });
    group.bench_function("human_10k_resources", |b| {
        b.iter(|| {
            let mut out = Vec::with_capacity(1 << 20);
            for resource in &resources {
                human::resource(&mut out, &provider, resource, human::Style::default()).unwrap();
            }
            black_box(out.len())
        })
    });
    group.finish();
}

criterion_group!(benches, parse_simple, write_outputs);
criterion_main!(benches);

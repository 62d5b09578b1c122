// swift-tools-version:6.0
import PackageDescription

// libFuzzer targets for what a peer or an editor hands ferry: the JSON parser, the ferry-1
// frame codec, the BLIP codec (Couchbase Lite's framing) and the revision log's line decoder. A package of its own because every module
// must be compiled with `-sanitize=fuzzer`, which the main build must not be:
// `scripts/fuzz.sh` builds and runs them.
let package = Package(
    name: "ferry-fuzz",
    dependencies: [.package(name: "ferry", path: "..")],
    targets: [
        .target(name: "FuzzDriver"),
        .executableTarget(name: "FuzzJSON", dependencies: ["FuzzDriver", .product(name: "FerryCore", package: "ferry")]),
        .executableTarget(name: "FuzzFrames", dependencies: [
            "FuzzDriver", .product(name: "FerryCore", package: "ferry"), .product(name: "FerryProtocol", package: "ferry"),
        ]),
        .executableTarget(name: "FuzzLogLines", dependencies: ["FuzzDriver", .product(name: "FerryCore", package: "ferry")]),
        .executableTarget(name: "FuzzBLIP", dependencies: ["FuzzDriver", .product(name: "FerryProtocol", package: "ferry")]),
    ]
)

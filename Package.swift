// swift-tools-version:6.0
import PackageDescription

let package = Package(
    name: "ferry",
    platforms: [.macOS(.v13)],
    products: [
        .executable(name: "ferry", targets: ["ferry"]),
        .executable(name: "ferry-bench", targets: ["FerryBench"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-crypto.git", from: "3.12.3"),
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-nio-ssl.git", from: "2.37.6"),
        .package(url: "https://github.com/apple/swift-certificates.git", from: "1.21.1"),
        .package(url: "https://github.com/apple/swift-asn1.git", from: "1.7.4"),
    ],
    targets: [
        .target(name: "FerryCore", dependencies: [.product(name: "Crypto", package: "swift-crypto")]),
        .target(name: "CFerrySystem"),
        .target(name: "FerryStore", dependencies: ["FerryCore", "CFerrySystem", .product(name: "Logging", package: "swift-log")]),
        .target(name: "FerryProtocol", dependencies: ["FerryCore"]),
        .target(name: "FerryNet", dependencies: [
            "FerryCore", "FerryProtocol",
            .product(name: "Crypto", package: "swift-crypto"),
            .product(name: "_CryptoExtras", package: "swift-crypto"),
            .product(name: "NIOCore", package: "swift-nio"),
            .product(name: "NIOPosix", package: "swift-nio"),
            .product(name: "NIOHTTP1", package: "swift-nio"),
            .product(name: "NIOWebSocket", package: "swift-nio"),
            .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
            .product(name: "NIOSSL", package: "swift-nio-ssl"),
            .product(name: "X509", package: "swift-certificates"),
            .product(name: "SwiftASN1", package: "swift-asn1"),
            .product(name: "Logging", package: "swift-log"),
        ]),
        .systemLibrary(name: "CDNSSD", path: "Sources/CDNSSD"),
        .target(name: "FerryDiscovery", dependencies: ["CDNSSD", "FerryCore"]),
        .target(name: "FerryReplicator", dependencies: ["FerryCore", "FerryStore", "FerryProtocol", .product(name: "Logging", package: "swift-log")]),
        .target(name: "FerryWatch", dependencies: ["FerryCore", "FerryStore", .product(name: "Logging", package: "swift-log")]),
        .target(name: "FerryAgent", dependencies: ["FerryCore", "FerryStore", "FerryWatch", "FerryNet", "FerryProtocol", "FerryReplicator", "FerryDiscovery", .product(name: "Logging", package: "swift-log")]),
        .target(name: "FerryTesting", dependencies: ["FerryCore", "FerryStore", "FerryProtocol"]),
        .executableTarget(name: "ferry", dependencies: [
            "FerryCore", "FerryStore", "FerryWatch", "FerryAgent", "FerryNet", "FerryProtocol", "FerryReplicator", "FerryDiscovery",
            .product(name: "ArgumentParser", package: "swift-argument-parser"),
            .product(name: "Logging", package: "swift-log"),
        ]),
        .executableTarget(name: "FerryBench", dependencies: ["FerryCore", "FerryStore", "FerryTesting"]),
        .testTarget(name: "FerryCoreTests", dependencies: ["FerryCore", "FerryTesting"]),
        .testTarget(name: "FerryStoreTests", dependencies: ["FerryCore", "FerryStore", "FerryTesting"]),
        .testTarget(name: "FerryProtocolTests", dependencies: ["FerryCore", "FerryProtocol"]),
        .testTarget(name: "FerryNetTests", dependencies: ["FerryCore", "FerryProtocol", "FerryNet"]),
        .testTarget(name: "FerryReplicatorTests", dependencies: ["FerryCore", "FerryStore", "FerryProtocol", "FerryNet", "FerryReplicator", "FerryTesting"]),
        .testTarget(name: "FerryWatchTests", dependencies: ["FerryCore", "FerryStore", "FerryWatch", "FerryTesting"]),
        .testTarget(name: "FerryCLITests", dependencies: ["FerryCore", "FerryStore", "FerryTesting"]),
    ]
)

// swift-tools-version:6.1
import PackageDescription

let package = Package(
    name: "image-fetch-worker",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "image-fetch-worker", targets: ["image-fetch-worker"]),
        .library(name: "ImageFetchWorker", targets: ["ImageFetchWorker"]),
        // Fixture images for the tests and the Benchmarks/ package; not needed to run the worker.
        .library(name: "ImageSamples", targets: ["ImageSamples"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.0"),
        .package(url: "https://github.com/apple/swift-metrics.git", from: "2.13.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus.git", from: "2.4.0"),
        .package(
            url: "https://github.com/apple/swift-configuration.git", from: "1.4.0",
            traits: [.defaults, "YAML", "CommandLineArguments"]
        ),
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.8.0"),
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.0"),
        .package(url: "https://github.com/apple/swift-crypto.git", "3.12.0"..<"5.0.0"),
        .package(url: "https://github.com/apple/swift-distributed-tracing.git", from: "1.7.3"),
        // Already swift-configuration's YAML reader; named for the config file's key check (YAMLKeyScan).
        .package(url: "https://github.com/jpsim/Yams", "5.4.0"..<"7.0.0"),
    ],
    targets: [
        .systemLibrary(
            name: "CRabbitMQ",
            pkgConfig: "librabbitmq",
            providers: [.apt(["librabbitmq-dev"])]
        ),
        .systemLibrary(
            name: "CCurl",
            pkgConfig: "libcurl",
            providers: [.apt(["libcurl4-openssl-dev"])]
        ),
        .systemLibrary(
            name: "CIDN2",
            pkgConfig: "libidn2",
            providers: [.apt(["libidn2-dev"])]
        ),
        .target(
            name: "CShims", dependencies: ["CCurl", "CRabbitMQ", "CIDN2"],
            // libssl for the fetch engine's TLS counters (tls_stats.c), the OpenSSL libcurl uses.
            linkerSettings: [.linkedLibrary("ssl"), .linkedLibrary("crypto")]),
        .target(
            name: "ImageFetchWorker",
            dependencies: [
                "CShims", "CCurl", "CRabbitMQ",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "Configuration", package: "swift-configuration"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Tracing", package: "swift-distributed-tracing"),
                .product(name: "Yams", package: "Yams"),
            ]
        ),
        .target(name: "ImageSamples"),
        .executableTarget(
            name: "image-fetch-worker",
            dependencies: [
                "ImageFetchWorker",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]
        ),
        // The end-to-end benchmark driver that scripts/bench.sh runs (not a product; not shipped).
        .executableTarget(
            name: "image-fetch-bench",
            dependencies: [
                "ImageSamples",
                "ImageFetchWorker",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
            ]
        ),
        .testTarget(
            name: "ImageFetchWorkerTests",
            dependencies: ["ImageFetchWorker", "ImageSamples", "CShims", "CCurl", "CRabbitMQ"]
        ),
        .testTarget(
            name: "IntegrationTests",
            dependencies: [
                "ImageFetchWorker", "CCurl",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
            ]
        ),
    ],
    swiftLanguageModes: [.v6]
)

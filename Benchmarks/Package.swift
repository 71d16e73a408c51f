// swift-tools-version:6.1
// Micro-benchmarks of the worker's hot-path pieces, with ordo-one/package-benchmark. A package of its
// own so the main package does not depend on the benchmark tooling.
//
//   cd Benchmarks && swift package benchmark            run them all
//   cd Benchmarks && swift package benchmark --filter 'SHA.*'
import PackageDescription

let package = Package(
    name: "ImageFetchWorkerBenchmarks",
    platforms: [.macOS(.v15)],
    dependencies: [
        // The worker itself, by path; `name:` keeps the identity stable whatever the checkout folder is called.
        .package(name: "image-fetch-worker", path: ".."),
        .package(
            url: "https://github.com/ordo-one/package-benchmark.git", from: "1.38.0", traits: ["MallocInterposer"]),
        .package(url: "https://github.com/apple/swift-crypto.git", "3.12.0"..<"5.0.0"),
    ],
    targets: [
        .executableTarget(
            name: "WorkerBenchmarks",
            dependencies: [
                .product(name: "Benchmark", package: "package-benchmark"),
                .product(name: "ImageFetchWorker", package: "image-fetch-worker"),
                .product(name: "ImageSamples", package: "image-fetch-worker"),
                .product(name: "Crypto", package: "swift-crypto"),
            ],
            path: "Benchmarks/WorkerBenchmarks",
            plugins: [.plugin(name: "BenchmarkPlugin", package: "package-benchmark")]
        )
    ],
    swiftLanguageModes: [.v6]
)

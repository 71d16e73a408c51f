import Crypto
import Testing

@testable import ImageFetchWorker

@Suite struct DigestHexStringTests {
    @Test func knownVectorsInLowercaseHex() {
        #expect(
            SHA256.hash(data: Array("abc".utf8)).hexString
                == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        #expect(
            SHA256.hash(data: [UInt8]()).hexString
                == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
    }
}

extension JobError {
    /// ``ImagePolicy``'s refusal in the result contract's terms: the same edge as
    /// `JobError+FetchError.swift`. Codes and messages are those results have always carried.
    package init(_ refusal: ImagePolicy.Refusal) {
        switch refusal {
        case .notAnImage(let reason?):
            self.init(.notAnImage, "the body is not a supported image (\(reason))")
        case .notAnImage(nil):
            self.init(.notAnImage, "the body is not a supported image")
        case .tooManyPixels(let width, let height):
            self.init(.tooManyPixels, "the image needs \(width) × \(height) pixels, over fetch.max_pixels")
        case .structure(let problem):
            self.init(problem)
        case .decode(let failure):
            self.init(failure)
        }
    }
}

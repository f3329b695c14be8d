#if !(canImport(Combine) || FuturesCombine)
import Testing

// Without Combine and without the package trait the bridge's module is empty: say so in the test
// report rather than pass in silence.
@Test(.disabled("FuturesCombine needs Combine or the package trait FuturesCombine: swift test --traits FuturesCombine"))
func theCombineBridgeIsBuiltWithItsTrait() {}
#endif

#if !FuturesNIO
import Testing

// Without the package trait the bridge's module is empty: say so in the test report rather than
// pass in silence.
@Test(.disabled("FuturesNIO is built with the package trait FuturesNIO: swift test --traits FuturesNIO"))
func theNIOBridgeIsBuiltWithItsTrait() {}
#endif

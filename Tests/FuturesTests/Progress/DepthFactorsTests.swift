import Foundation
import Testing

@testable import Futures

/// The weights of a merge set's depths, kept so that a split gives each part its own.
@Suite struct DepthFactorsTests {
    static func factors(_ values: [Double]) -> DepthFactors {
        var factors = DepthFactors()
        for value in values { factors.append(value) }
        return factors
    }

    @Test func equalFactorsStayOneRunHoweverDeep() {
        var factors = DepthFactors()
        for _ in 0..<100_000 { factors.append(0.5) }
        #expect(factors.runs == [DepthFactors.Run(factor: 0.5, count: 100_000)])
        #expect(factors.count == 100_000)
    }

    @Test func theProductOfNothingIsOne() {
        #expect(DepthFactors().product == 1)
        #expect(DepthFactors().split(at: 3).0.count == 0)
    }

    @Test func aSplitCutsTheRunItFallsIn() {
        let factors = Self.factors([0.5, 0.5, 0.25, 0.25, 0.25, 1])
        let (above, below) = factors.split(at: 3)
        #expect(above.runs == [.init(factor: 0.5, count: 2), .init(factor: 0.25, count: 1)])
        #expect(below.runs == [.init(factor: 0.25, count: 2), .init(factor: 1, count: 1)])
        #expect(above.product == 0.0625)
        #expect(below.product == 0.0625)
        #expect(above.product * below.product == factors.product)
        // At either end, one part is empty.
        #expect(factors.split(at: 0).0.count == 0)
        #expect(factors.split(at: 6).1.count == 0)
        #expect(factors.split(at: 9).0.count == 6)
    }

    @Test func appendingASetJoinsItsFirstRunToTheLast() {
        var top = Self.factors([0.5, 0.25])
        top.append(contentsOf: Self.factors([0.25, 0.75]))
        #expect(top.runs == [.init(factor: 0.5, count: 1), .init(factor: 0.25, count: 2), .init(factor: 0.75, count: 1)])
    }

    /// Weights that change at every level fold into at most `maximumRuns` runs; the product of
    /// the whole set, and of the runs left whole, stays what it was.
    @Test func weightsThatKeepChangingFoldIntoFewRuns() {
        let values = (0..<200).map { $0.isMultiple(of: 2) ? 0.5 : 0.25 }
        let factors = Self.factors(values)
        #expect(factors.runs.count <= DepthFactors.maximumRuns)
        #expect(factors.count == 200)
        let exact = values.reduce(1, *)
        #expect(abs(factors.product - exact) <= exact * 1e-9)
        // The last levels were never folded: a split there is exact.
        let (_, below) = factors.split(at: 196)
        #expect(below.product == values[196...].reduce(1, *))
    }

    /// A zero factor (a weight of 1) is never folded into others: the depths below it keep their
    /// own product, and a split just below it gets it.
    @Test func aZeroFactorIsNeverFoldedWithOthers() {
        let values = [0] + (0..<40).map { $0.isMultiple(of: 2) ? 0.5 : 0.25 }
        let factors = Self.factors(values)
        #expect(factors.product == 0)
        #expect(factors.runs.count <= DepthFactors.maximumRuns)
        #expect(factors.runs[0] == DepthFactors.Run(factor: 0, count: 1))
        let (above, below) = factors.split(at: 1)
        #expect(above.product == 0)
        let exact = values.dropFirst().reduce(1, *)
        #expect(abs(below.product - exact) <= exact * 1e-9)
    }
}

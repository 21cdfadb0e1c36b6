#if canImport(Glibc)
    package import Glibc
#elseif canImport(Musl)
    package import Musl
#elseif canImport(Darwin)
    package import Darwin
#endif

/// A value behind a `pthread_mutex_t`, with the `withLock` API of the standard library's `Mutex`.
///
/// The package uses it instead of `Synchronization.Mutex` because ThreadSanitizer cannot see the standard library's
/// futex-based lock on Linux: every access it protects is reported as a race (a two-thread program that appends to
/// an array under `Mutex.withLock` is enough), which would bury real reports. ThreadSanitizer intercepts
/// `pthread_mutex_lock`, so with this type `scripts/sanitize.sh thread` reports only what is really unprotected.
/// Uncontended, both cost the same (one atomic exchange).
///
/// `@unchecked Sendable`: `value` is only read or written inside ``withLock(_:)``, while `mutex` is held, and
/// values enter and leave through `sending`, as with `Mutex`.
///
/// ``withLock(_:)`` is inlinable: every module of the package takes its locks on hot paths (a cache hit takes
/// two), and a generic call into another module would not be specialized for the value or inline the closure.
package final class Locked<Value: ~Copyable>: @unchecked Sendable {
    @usableFromInline let mutex: UnsafeMutablePointer<pthread_mutex_t>
    @usableFromInline var value: Value

    /// Creates the lock holding `initialValue`.
    package init(_ initialValue: consuming sending Value) {
        mutex = .allocate(capacity: 1)
        mutex.initialize(to: pthread_mutex_t())
        #if canImport(Glibc)
            // Adaptive: a thread that finds the lock taken spins briefly (a bounded number of tries) before sleeping
            // in the kernel. The package's critical sections are short, so the holder is nearly always out before
            // the spin ends and the waiter is spared a futex sleep and two context switches (the DoH client's
            // hand-over lock, taken by every lookup and by the event loop, was one such: Benchmarks/README.md).
            var attributes = pthread_mutexattr_t()
            pthread_mutexattr_init(&attributes)
            pthread_mutexattr_settype(&attributes, Int32(PTHREAD_MUTEX_ADAPTIVE_NP))
            pthread_mutex_init(mutex, &attributes)
            pthread_mutexattr_destroy(&attributes)
        #else
            pthread_mutex_init(mutex, nil)
        #endif
        value = initialValue
    }

    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
    }

    /// Runs `body` with exclusive access to the value.
    @inlinable
    package func withLock<Result: ~Copyable, E: Error>(
        _ body: (inout sending Value) throws(E) -> sending Result
    ) throws(E) -> sending Result {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body(&value)
    }
}

#if canImport(FoundationNetworking)
    @_spi(Reflection) import Swift
    import HTTPDNS

    /// A stored property that corelibs keeps private, read straight from the object that holds it.
    ///
    /// A `Mirror` builds a field's type from its mangled name on every read: 10–17 µs a field, three fields a request
    /// on the URL protocol's path. Here the field's offset and type are found once per class and name (the standard
    /// library's field walk, `_forEachField`) and checked once against what a `Mirror` reads there: same type, same
    /// bytes. A weak reference fails that check (it holds the address of a side table, not of the object) and is
    /// never read this way; an unowned one holds the object's address and reads as a strong reference, which is safe
    /// while its object lives, as its holder promises. Every later read is one typed load, under a microsecond.
    struct StoredField: @unchecked Sendable {
        // Sendable: both fields are constants; a metatype is immutable, global data.
        /// The field's offset from the start of the object.
        let offset: Int
        /// The field's declared type.
        let type: Any.Type

        /// The stored property `name` of `object` or of one of its superclasses, unwrapped when optional; `nil` when
        /// it holds `nil`, or when there is no such field that can be read safely.
        ///
        /// Call it only where corelibs itself reads and writes the field (for a task and its session: the session's
        /// work queue).
        static func value(_ name: String, of object: AnyObject) -> Any? {
            let key = Key(type: ObjectIdentifier(Swift.type(of: object)), name: name)
            let field: StoredField?
            if let known = table.withLock({ $0[key] }) {
                field = known.field
            } else {
                field = locate(name, in: object)
                table.withLock { $0[key] = Located(field: field) }
            }
            return field?.load(from: object)
        }

        /// The value at this field of `object`, copied (a reference in it retained), unwrapped when optional.
        private func load(from object: AnyObject) -> Any? {
            withExtendedLifetime(object) { _openExistential(type, do: reader)(address(in: object)) }
        }

        /// Where this field is in `object`, valid while the caller keeps `object` alive.
        private func address(in object: AnyObject) -> UnsafeRawPointer {
            UnsafeRawPointer(Unmanaged.passUnretained(object).toOpaque()).advanced(by: offset)
        }

        /// Finds `name` among the fields of `object`'s class and superclasses, and keeps it only when a `Mirror`
        /// reads the same there.
        private static func locate(_ name: String, in object: AnyObject) -> StoredField? {
            var current: AnyClass? = Swift.type(of: object)
            while let someClass = current {
                var found: StoredField?
                _ = _forEachField(of: someClass, options: classFields) { label, offset, type, _ in
                    guard String(cString: label) == name else { return true }
                    found = StoredField(offset: offset, type: type)
                    return false
                }
                if let found {
                    guard let mirrored = mirrored(name, of: object) else { return nil }
                    return found.holds(mirrored, in: object) ? found : nil
                }
                current = _getSuperclass(someClass)
            }
            return nil
        }

        /// The field `name` of `object` as a `Mirror` reads it (not unwrapped).
        private static func mirrored(_ name: String, of object: AnyObject) -> Any? {
            var mirror: Mirror? = Mirror(reflecting: object)
            while let current = mirror {
                if let child = current.children.first(where: { $0.label == name }) { return child.value }
                mirror = current.superclassMirror
            }
            return nil
        }

        /// Whether this field of `object` holds `value`, of the declared type, bit for bit.
        private func holds(_ value: Any, in object: AnyObject) -> Bool {
            guard Swift.type(of: value) == type else { return false }
            return withExtendedLifetime(object) { _openExistential(type, do: bytesEqual)(value, address(in: object)) }
        }

        /// A field's place in the table: where it is, or that it cannot be read.
        private struct Located: Sendable {
            var field: StoredField?
        }

        private struct Key: Hashable {
            var type: ObjectIdentifier
            var name: String
        }

        /// The fields located so far, by class and name.
        private static let table = Locked([Key: Located]())
    }

    /// `_forEachField`'s options `.classType` (bit 0: the type is a class) and `.ignoreUnknown` (bit 1: skip fields
    /// that cannot be described), spelled by value: the standard library declares them as mutable statics.
    private let classFields = _EachFieldOptions(rawValue: 0b11)

    /// Reads a `Value` at an address, unwrapped when it is optional.
    private func reader<Value>(_: Value.Type) -> (UnsafeRawPointer) -> Any? {
        { address in
            let value = address.assumingMemoryBound(to: Value.self).pointee
            guard let optional = value as? any OptionalValue else { return value }
            return optional.wrappedValue
        }
    }

    /// An `Optional` of any type, for unwrapping a value whose type is known only at run time.
    private protocol OptionalValue {
        /// The wrapped value, `nil` when there is none.
        var wrappedValue: Any? { get }
    }

    extension Optional: OptionalValue {
        fileprivate var wrappedValue: Any? { map { $0 } }
    }
#endif

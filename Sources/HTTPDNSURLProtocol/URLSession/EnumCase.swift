#if canImport(FoundationNetworking)
    import HTTPDNS

    /// The case a value of a private enum holds, and its payload, read through the enum's value witnesses.
    ///
    /// A `Mirror` of an enum value builds its payload's type from a mangled name on every read: about 9 µs in a loop,
    /// tens of microseconds on a request's cold path. The enum's value witness table (the functions every Swift type
    /// carries for copying and inspecting its values) tells the case by number (`getEnumTag`) and exposes its payload
    /// in place (`destructiveProjectEnumData`, undone by `destructiveInjectEnumTag`). A case's name and payload type
    /// are learnt once per enum type and case number from a `Mirror`, and the payload read in place is checked once
    /// against the `Mirror`'s, bit for bit. A case that fails that check (an indirect one, held in a box, say) is read
    /// by a `Mirror` every time.
    ///
    /// A function in a payload comes out as a `Mirror` gives it: with the payload's calling convention, not the one a
    /// function of its type has elsewhere. It can be looked at, never called.
    enum EnumCase {
        /// The name of the case `value` holds and its payload (`nil` for a case without one); `nil` when `value` is
        /// not an enum.
        static func of(_ value: Any) -> (name: String, payload: Any?)? {
            _openExistential(value, do: read)
        }

        /// Whether the payload of `value`'s case is read in place (`nil`: not learnt yet, or not an enum).
        static func readsInPlace(_ value: Any) -> Bool? {
            func learnt<Value>(_ value: Value) -> Bool? {
                guard let (_, _, key) = caseKey(of: value) else { return nil }
                return LearntCase.table.withLock { $0[key] }.map { $0.payloadType != nil }
            }
            return _openExistential(value, do: learnt)
        }
    }

    /// What is known of one case of one enum type.
    private struct LearntCase: @unchecked Sendable {
        // Sendable: constants; a metatype is immutable, global data.
        /// The case's name.
        var name: String
        /// The payload's type when the payload can be read in place, `nil` when it has none or cannot.
        var payloadType: Any.Type?
        /// Whether the case has a payload.
        var hasPayload: Bool

        struct Key: Hashable {
            var type: ObjectIdentifier
            var tag: UInt32
        }

        /// The cases learnt so far, by enum type and case number.
        static let table = Locked([Key: LearntCase]())
    }

    /// `value`'s enum functions, case number and key in the table; `nil` when it is not an enum.
    private func caseKey<Value>(of value: Value) -> (EnumWitnesses, UInt32, LearntCase.Key)? {
        guard let witnesses = EnumWitnesses(Value.self) else { return nil }
        let tag = withUnsafePointer(to: value) { witnesses.tag(UnsafeRawPointer($0)) }
        return (witnesses, tag, LearntCase.Key(type: ObjectIdentifier(Value.self), tag: tag))
    }

    private func read<Value>(_ value: Value) -> (name: String, payload: Any?)? {
        guard let (witnesses, tag, key) = caseKey(of: value) else { return nil }
        guard let known = LearntCase.table.withLock({ $0[key] }) else {
            let (learnt, payload) = learn(value, tag: tag, witnesses: witnesses)
            LearntCase.table.withLock { $0[key] = learnt }
            return (learnt.name, payload)
        }
        guard known.hasPayload else { return (known.name, nil) }
        guard let payloadType = known.payloadType else {
            return (known.name, Mirror(reflecting: value).children.first?.value)
        }
        return (known.name, witnesses.payload(of: value, tag: tag, as: payloadType))
    }

    /// Learns a case from `value`, which holds it, and returns the payload as a `Mirror` reads it.
    private func learn<Value>(_ value: Value, tag: UInt32, witnesses: EnumWitnesses) -> (LearntCase, Any?) {
        guard let child = Mirror(reflecting: value).children.first, let label = child.label else {
            return (LearntCase(name: String(describing: value), payloadType: nil, hasPayload: false), nil)
        }
        let payloadType = type(of: child.value)
        let inPlace = witnesses.payloadBytesEqual(of: value, tag: tag, as: payloadType, to: child.value)
        return (LearntCase(name: label, payloadType: inPlace ? payloadType : nil, hasPayload: true), child.value)
    }

    /// An enum type's metadata and the three enum functions of its value witness table.
    ///
    /// The layout is the Swift runtime's (`ValueWitnessTable` and `EnumValueWitnessTable` in its ABI headers): the
    /// table's address is the word before the metadata; eight functions, the size, the stride, 32 bits of flags and
    /// 32 of extra inhabitants, then the enum functions. A type whose metadata is not an enum's, or whose flags do not
    /// say it has enum functions, is not read.
    private struct EnumWitnesses {
        typealias Tag = @convention(thin) (UnsafeRawPointer, UnsafeRawPointer) -> UInt32
        typealias Project = @convention(thin) (UnsafeMutableRawPointer, UnsafeRawPointer) -> Void
        typealias Inject = @convention(thin) (UnsafeMutableRawPointer, UInt32, UnsafeRawPointer) -> Void

        let metadata: UnsafeRawPointer
        let getTag: Tag
        let project: Project
        let inject: Inject

        /// Metadata kinds: an enum, an `Optional`.
        private static let enumKind = 0x201
        private static let optionalKind = 0x202
        /// The value witness flag that says the table has the enum functions.
        private static let hasEnumWitnesses: UInt32 = 0x0020_0000

        init?(_ type: Any.Type) {
            metadata = unsafeBitCast(type, to: UnsafeRawPointer.self)
            let kind = metadata.load(as: Int.self)
            guard kind == Self.enumKind || kind == Self.optionalKind else { return nil }
            let word = MemoryLayout<Int>.size
            let table = metadata.load(fromByteOffset: -word, as: UnsafeRawPointer.self)
            guard table.load(fromByteOffset: 10 * word, as: UInt32.self) & Self.hasEnumWitnesses != 0 else {
                return nil
            }
            getTag = table.load(fromByteOffset: 10 * word + 8, as: Tag.self)
            project = table.load(fromByteOffset: 11 * word + 8, as: Project.self)
            inject = table.load(fromByteOffset: 12 * word + 8, as: Inject.self)
        }

        /// The case number of the enum value at `address`.
        func tag(_ address: UnsafeRawPointer) -> UInt32 { getTag(address, metadata) }

        /// Runs `body` on `value`'s payload in place: on a copy whose payload is exposed, then closed again and
        /// destroyed.
        private func withPayload<Value, Result>(
            of value: Value, tag: UInt32, _ body: (UnsafeMutableRawPointer) -> Result
        ) -> Result {
            let copy = UnsafeMutablePointer<Value>.allocate(capacity: 1)
            copy.initialize(to: value)
            defer {
                inject(UnsafeMutableRawPointer(copy), tag, metadata)
                copy.deinitialize(count: 1)
                copy.deallocate()
            }
            project(UnsafeMutableRawPointer(copy), metadata)
            return body(UnsafeMutableRawPointer(copy))
        }

        /// `value`'s payload, of the type learnt for its case, copied out.
        func payload<Value>(of value: Value, tag: UInt32, as payloadType: Any.Type) -> Any {
            withPayload(of: value, tag: tag) { _openExistential(payloadType, do: copier)(UnsafeRawPointer($0)) }
        }

        /// Whether `value`'s payload in place has the bytes of `mirrored` (the payload as a `Mirror` reads it).
        func payloadBytesEqual<Value>(of value: Value, tag: UInt32, as payloadType: Any.Type, to mirrored: Any)
            -> Bool
        {
            withPayload(of: value, tag: tag) {
                _openExistential(payloadType, do: bytesEqual)(mirrored, UnsafeRawPointer($0))
            }
        }
    }

    /// Copies a `Payload` out of an address.
    private func copier<Payload>(_: Payload.Type) -> (UnsafeRawPointer) -> Any {
        { $0.assumingMemoryBound(to: Payload.self).pointee }
    }

    /// Compares a value, cast to `Stored`, with the bytes at an address: whether a value read by reflection is the
    /// one stored there, bit for bit (``StoredField``, ``EnumCase``).
    func bytesEqual<Stored>(_: Stored.Type) -> (Any, UnsafeRawPointer) -> Bool {
        { value, address in
            guard let value = value as? Stored else { return false }
            return withUnsafeBytes(of: value) { bytes in
                bytes.elementsEqual(UnsafeRawBufferPointer(start: address, count: MemoryLayout<Stored>.size))
            }
        }
    }
#endif

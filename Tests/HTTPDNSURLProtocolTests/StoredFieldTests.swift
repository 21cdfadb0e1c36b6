#if canImport(FoundationNetworking)
    import FoundationNetworking
    import Foundation
    import Testing
    @testable import HTTPDNSURLProtocol

    /// Reading private stored properties at their offsets, as the URL protocol reads corelibs' task registry: every
    /// kind of field it may meet, including the ones it must refuse.
    @Suite("Stored fields read at their offsets")
    struct StoredFieldTests {
        class Base {
            let inherited = "from the base"
            init() {}
        }

        final class Holder: Base {
            let number = 42
            var present: Holder.Part? = Part(tag: 7)
            var absent: Part? = nil
            var existential: (any CustomStringConvertible)? = 3.5
            var classBound: (any AnyObject & Sendable)? = Tag()
            var table: [Int: String] = [1: "one"]
            weak var weakly: Part?
            unowned let owner: Part
            let keep: Part

            final class Tag: Sendable {}

            final class Part {
                let tag: Int
                init(tag: Int) { self.tag = tag }
            }

            override init() {
                keep = Part(tag: 9)
                owner = keep
                super.init()
                weakly = keep
            }
        }

        @Test("plain, optional, existential, dictionary and inherited fields read as a Mirror reads them")
        func plainFields() throws {
            let holder = Holder()
            #expect(StoredField.value("number", of: holder) as? Int == 42)
            #expect((StoredField.value("present", of: holder) as? Holder.Part)?.tag == 7)
            #expect(StoredField.value("absent", of: holder) == nil, "an optional holding nil reads as nil")
            // A class-bound existential (corelibs' task keeps its session as one) is two words, read as they are.
            let classBound = try #require(StoredField.value("classBound", of: holder) as? Holder.Tag)
            #expect(classBound === (holder.classBound as? Holder.Tag))
            // Any other existential may hold its value in a buffer whose unused bytes are unspecified: it is read
            // only when the bytes agree with what a Mirror reads, and never as another value.
            let existential = StoredField.value("existential", of: holder)
            #expect(existential == nil || existential as? Double == 3.5)
            #expect(StoredField.value("table", of: holder) as? [Int: String] == [1: "one"])
            #expect(StoredField.value("inherited", of: holder) as? String == "from the base")
            // A second read goes to the located offset and sees later writes.
            holder.present = Holder.Part(tag: 8)
            holder.absent = Holder.Part(tag: 1)
            #expect((StoredField.value("present", of: holder) as? Holder.Part)?.tag == 8)
            #expect((StoredField.value("absent", of: holder) as? Holder.Part)?.tag == 1)
        }

        @Test("a weak reference and unknown names are refused, never read as strong references")
        func refusedFields() {
            let holder = Holder()
            #expect(StoredField.value("weakly", of: holder) == nil, "a weak reference is not a plain value")
            #expect(StoredField.value("weakly", of: holder) == nil, "refused again from the table")
            // An unowned reference holds the object's own address: it reads as the object, which is alive here.
            #expect(StoredField.value("owner", of: holder) as? Holder.Part === holder.keep)
            #expect(StoredField.value("missing", of: holder) == nil)
            #expect((StoredField.value("keep", of: holder) as? Holder.Part)?.tag == 9)
        }

        @Test("a URLSession task's session and the session's task registry, as corelibs lays them out")
        func corelibsFields() throws {
            let session = URLSession(configuration: .ephemeral)
            defer { session.invalidateAndCancel() }
            let url = URL(string: "http://127.0.0.1:9/")!
            let task = session.dataTask(with: url)
            #expect(TaskForm.session(of: task) === session)
            #expect(StoredField.value("taskRegistry", of: session) != nil)
            // The session adds a task to its registry on its work queue, and `getAllTasks` answers from that queue
            // after the adds: the registry is read only once nothing writes it (reading it while an add ran on the
            // work queue crashed a plain run once; the URL protocol reads it on that queue).
            let handled = session.dataTask(with: url) { _, _, _ in }
            let settled = DispatchSemaphore(value: 0)
            session.getAllTasks { _ in settled.signal() }
            #expect(settled.wait(timeout: .now() + 10) == .success)
            let forms = [TaskForm.of(task, in: session), TaskForm.of(handled, in: session)]
            #expect(forms == [.collected, .collected], "the session's delegate (none) and a completion handler")
        }
    }
#endif

#if canImport(FoundationNetworking)
    import Testing
    @testable import HTTPDNSURLProtocol

    /// Reading the case of an enum through its value witnesses, as the URL protocol reads a task's behaviour.
    @Suite("Enum cases read through their value witnesses")
    struct EnumCaseTests {
        final class Listener: Sendable {}

        /// Laid out as corelibs' task behaviours are: a case without payload, a function, a function and an optional
        /// class reference.
        enum Behaviour {
            case plain
            case handler(@Sendable (Int) -> Int)
            case handlerWithListener(@Sendable (Int) -> Int, Listener?)
            case text(String)
        }

        indirect enum Tree {
            case leaf(String)
            case node(Tree, Tree)
        }

        @Test("every case's name and payload, the first time and from the learnt table, as a Mirror reads them")
        func cases() throws {
            let listener = Listener()
            for round in 0..<2 {
                #expect(EnumCase.of(Behaviour.plain)?.name == "plain")
                #expect(EnumCase.of(Behaviour.plain)?.payload == nil)
                let handler = try #require(EnumCase.of(Behaviour.handler { $0 + 1 }))
                #expect(handler.name == "handler")
                // A function read by reflection keeps the payload's calling convention, not its type's: it is
                // looked at (the URL protocol only checks the delegate beside it), never called.
                #expect(handler.payload is @Sendable (Int) -> Int)
                let with = try #require(EnumCase.of(Behaviour.handlerWithListener({ $0 * 2 }, listener)))
                #expect(with.name == "handlerWithListener")
                let parts = try #require(with.payload as? (Any, Listener?))
                #expect(parts.1 === listener)
                let without = try #require(EnumCase.of(Behaviour.handlerWithListener({ $0 }, nil)))
                #expect((without.payload as? (Any, Listener?)).map { $0.1 == nil } == true)
                #expect(EnumCase.of(Behaviour.text("payload"))?.payload as? String == "payload")
                if round == 1 {
                    #expect(EnumCase.readsInPlace(Behaviour.handlerWithListener({ $0 }, listener)) == true)
                    #expect(EnumCase.readsInPlace(Behaviour.text("")) == true)
                }
            }
        }

        @Test("an indirect case keeps its payload in a box: read by a Mirror, and right")
        func indirectCases() throws {
            for _ in 0..<2 {
                let node = try #require(EnumCase.of(Tree.node(.leaf("left"), .leaf("right"))))
                #expect(node.name == "node")
                let children = try #require(node.payload as? (Tree, Tree))
                #expect(EnumCase.of(children.1)?.payload as? String == "right")
            }
            #expect(EnumCase.readsInPlace(Tree.leaf("")) == false)
        }

        @Test("optionals are enums too; anything else is not read")
        func notEnums() {
            #expect(EnumCase.of(Optional(5) as Any)?.name == "some")
            #expect(EnumCase.of(Optional(5) as Any)?.payload as? Int == 5)
            #expect(EnumCase.of(5) == nil)
            #expect(EnumCase.of("text") == nil)
            #expect(EnumCase.of(Listener()) == nil)
        }
    }
#endif

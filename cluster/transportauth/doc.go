// Package transportauth owns the authentication of Orrery's actor transport (protoactor-go
// remote over gRPC): mutual TLS 1.3 between silos and from clients against one cluster CA, the
// identity a certificate names, and what a stream authenticated by a client certificate may
// deliver.
//
// Identities. A certificate with the URI SAN "orrery:silo:<name>" names a silo: a stream it
// opens may deliver any message. Any other certificate names a client whose principal is its URI
// SAN "orrery:principal:<p>" when it has one, else its subject common name. A client
// certificate with no principal, or whose principal starts with "system:" (Orrery's own
// principals), is refused in the TLS handshake. Host names and addresses are not checked: the
// address of a peer comes from gossip, the identity that matters is the one its certificate
// names and the CA signed. A client (Credentials.ForClient) accepts only silo certificates from
// the silos it dials; a silo accepts any certificate of the CA from the clients it dials back to
// answer (protoactor remoting is two one-way streams: each node dials the other to send).
//
// Client streams. On a stream opened by a client certificate, the interceptor (ServerOptions)
// checks every message batch before protoactor decodes it: only the message types a client
// sends are delivered (ClientMessageTypes: CommandRequest, InspectRequest and the
// PartitionActivationRequest of the partition lookup); the principal field of each
// CommandRequest and InspectRequest is overwritten with the certificate's principal, so no field
// a client sends chooses who it acts as. An envelope of another type is dropped (and its type
// logged once per process); a CommandRequest with due set (the due coordinator's, silos only),
// an envelope that is not protobuf-encoded, that does not decode, or whose type, target or
// sender index is out of range ends the stream with PermissionDenied. The transport's unary
// methods (unimplemented in protoactor, they panic) are refused to everyone.
//
// Development certificates. WriteDevelopment writes a CA and certificates for named silos and
// client principals (the `silo certs` command); they are for development and tests only.
package transportauth

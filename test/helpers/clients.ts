import * as grpc from '@grpc/grpc-js';
import { createClient, type Client } from '@connectrpc/connect';
import { createConnectTransport } from '@connectrpc/connect-node';
import { create, fromBinary, toBinary, type DescMessage, type DescService, type MessageInitShape, type MessageShape } from '@bufbuild/protobuf';

/** Connect JSON client over HTTP/1.1 against the real server. */
export function connectClient<S extends DescService>(service: S, baseUrl: string): Client<S> {
  return createClient(service, createConnectTransport({ baseUrl, httpVersion: '1.1', useBinaryFormat: false }));
}

/** A real gRPC channel from @grpc/grpc-js (h2c) to the server. Close it after the test. */
export function grpcChannel(baseUrl: string): grpc.Client {
  const { host } = new URL(baseUrl);
  return new grpc.Client(host, grpc.credentials.createInsecure());
}

export type GrpcResult<O extends DescMessage> =
  | { ok: true; message: MessageShape<O> }
  | { ok: false; code: grpc.status; details: string; metadata: grpc.Metadata };

/** Calls one unary method through @grpc/grpc-js with protobuf-es (de)serialization. */
export function grpcUnary<I extends DescMessage, O extends DescMessage>(
  client: grpc.Client,
  service: DescService,
  method: { name: string; input: I; output: O },
  request: MessageInitShape<I>,
  token?: string,
): Promise<GrpcResult<O>> {
  const md = new grpc.Metadata();
  if (token !== undefined) md.set('authorization', `Bearer ${token}`);
  const path = `/${service.typeName}/${method.name}`;
  return new Promise((resolve) => {
    client.makeUnaryRequest(
      path,
      (m: MessageShape<I>) => Buffer.from(toBinary(method.input, m)),
      (b: Buffer) => fromBinary(method.output, b),
      create(method.input, request),
      md,
      (err, value) => {
        if (err) resolve({ ok: false, code: err.code, details: err.details, metadata: err.metadata });
        else resolve({ ok: true, message: value as MessageShape<O> });
      },
    );
  });
}

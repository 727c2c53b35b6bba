import { fromBinary, toBinary, create, type DescMessage, type MessageInitShape, type MessageShape } from '@bufbuild/protobuf';

/** One gRPC-Web call made with plain fetch, so the test sees the raw wire answer. */
export type GrpcWebResult<O extends DescMessage> = {
  httpStatus: number;
  headers: Headers;
  /** grpc-status from the trailer frame, else from the response headers (trailers-only answer). */
  grpcStatus: number | undefined;
  grpcMessage: string | undefined;
  /** Every trailer (lowercased names) of the trailer frame, if one was sent. */
  trailers: Record<string, string>;
  message: MessageShape<O> | undefined;
};

/** Frames one protobuf message as a gRPC-Web data frame (flag 0, 4-byte big-endian length). */
export function grpcWebFrame(payload: Uint8Array): Uint8Array {
  const out = new Uint8Array(5 + payload.length);
  new DataView(out.buffer).setUint32(1, payload.length);
  out.set(payload, 5);
  return out;
}

/** POSTs `application/grpc-web+proto` to `/<service>/<method>` and decodes the frames of the answer. */
export async function grpcWebUnary<I extends DescMessage, O extends DescMessage>(
  baseUrl: string,
  serviceTypeName: string,
  method: { name: string; input: I; output: O },
  request: MessageInitShape<I>,
  token?: string,
): Promise<GrpcWebResult<O>> {
  const headers: Record<string, string> = { 'content-type': 'application/grpc-web+proto', 'x-grpc-web': '1' };
  if (token !== undefined) headers.authorization = `Bearer ${token}`;
  const res = await fetch(`${baseUrl}/${serviceTypeName}/${method.name}`, {
    method: 'POST',
    headers,
    body: grpcWebFrame(toBinary(method.input, create(method.input, request))),
  });
  const buf = new Uint8Array(await res.arrayBuffer());
  let message: MessageShape<O> | undefined;
  const trailers: Record<string, string> = {};
  for (let at = 0; at + 5 <= buf.length; ) {
    const flag = buf[at]!;
    const len = new DataView(buf.buffer, buf.byteOffset + at + 1, 4).getUint32(0);
    const body = buf.subarray(at + 5, at + 5 + len);
    if (flag & 0x80) {
      for (const line of new TextDecoder().decode(body).split('\r\n')) {
        const i = line.indexOf(':');
        if (i > 0) trailers[line.slice(0, i).trim().toLowerCase()] = line.slice(i + 1).trim();
      }
    } else {
      message = fromBinary(method.output, body);
    }
    at += 5 + len;
  }
  const statusText = trailers['grpc-status'] ?? res.headers.get('grpc-status') ?? undefined;
  const rawMessage = trailers['grpc-message'] ?? res.headers.get('grpc-message') ?? undefined;
  return {
    httpStatus: res.status,
    headers: res.headers,
    grpcStatus: statusText === undefined ? undefined : Number(statusText),
    grpcMessage: rawMessage === undefined ? undefined : decodeURIComponent(rawMessage),
    trailers,
    message,
  };
}

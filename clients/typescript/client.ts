// The dialectic API from TypeScript (docs/clients.md): the generated messages
// and service (gen/, from proto/ by deploy/clients.sh generate) and a client of
// DialecticService over gRPC-Web, which browsers speak and the gateway answers
// on its gRPC port once an origin is listed (DIALECTIC_GATEWAY__WEB_ORIGINS).
import { type Client, type Interceptor, createClient } from "@connectrpc/connect";
import { createGrpcWebTransport } from "@connectrpc/connect-web";
import { DialecticService } from "./gen/dialectic/v1/gateway_pb";

export * from "./gen/dialectic/v1/gateway_pb";
export { Code, ConnectError } from "@connectrpc/connect";

export type DialecticClient = Client<typeof DialecticService>;

/**
 * A client of the gateway at `baseUrl` (e.g. `http://127.0.0.1:7051`) that
 * sends `apiKey` as `authorization: Bearer …` on every call, the gateway's
 * only way to take a key. A refused call throws a ConnectError whose `code`
 * is the gRPC status (docs/errors.md).
 */
export function dialecticClient(baseUrl: string, apiKey: string): DialecticClient {
  const bearer: Interceptor = (next) => (request) => {
    request.header.set("authorization", `Bearer ${apiKey}`);
    return next(request);
  };
  const transport = createGrpcWebTransport({
    baseUrl: baseUrl.replace(/\/$/, ""),
    interceptors: [bearer],
  });
  return createClient(DialecticService, transport);
}

import { bufferFromFileOrString, KubeConfig } from '@kubernetes/client-node';

/*
 * The part of `@kubernetes/client-node` the plugin uses: the kubeconfig (files, plugins,
 * TLS options). Imported by name, so the bundle (hack/build-cli.ts) keeps only this and
 * what it needs: about 1.2 MB instead of the whole generated API's 14 MB, which is most of
 * the time a completion of Conversation names takes. kube-connection.ts imports this
 * module when it first reads a kubeconfig.
 */

/** What kube-connection.ts calls. */
export const clientNode = { KubeConfig, bufferFromFileOrString } as const;

/** The type of {@link clientNode}. */
export type ClientNode = typeof clientNode;

/**
 * The control plane's own ServiceAccount on the local cluster, with the ClusterRole and
 * binding config/cluster ships: tests that act as the control plane (reading a granted
 * Secret, reconciling Agents) get a kubeconfig for it, and kubectl as the cluster's admin
 * to run the grants a namespace owner would.
 */
import type { KubeConfig } from '@kubernetes/client-node';
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { defaultBinDir, repoRoot } from '../../../hack/lib/paths';
import { kubeConfig, sharedCluster } from './kube';
import { CONTROL_PLANE_NAMESPACE } from './peer-pods';

/** The control plane's ServiceAccount. */
export const CONTROL_PLANE_ACCOUNT = {
  name: 'polychrome-control-plane',
  namespace: CONTROL_PLANE_NAMESPACE,
} as const;

/** The user name the API server gives that ServiceAccount. */
export const CONTROL_PLANE_USER = `system:serviceaccount:${CONTROL_PLANE_ACCOUNT.namespace}:${CONTROL_PLANE_ACCOUNT.name}`;

/** A kubeconfig as the control plane, and kubectl as the cluster's admin. */
export interface ControlPlaneIdentity {
  readonly asControlPlane: KubeConfig;
  kubectl(args: readonly string[]): string;
}

/** Applies the shipped RBAC and mints the control plane's identity. */
export async function controlPlaneIdentity(): Promise<ControlPlaneIdentity> {
  const cluster = await sharedCluster();
  const kubectl = (args: readonly string[]): string =>
    execFileSync(
      join(defaultBinDir, 'kubectl'),
      [`--kubeconfig=${cluster.kubeconfigPath}`, ...args],
      {
        encoding: 'utf8',
      },
    );
  // The ServiceAccount, the ClusterRole and its binding, as shipped.
  kubectl(['apply', '--server-side', '-k', join(repoRoot, 'config', 'default')]);
  const asControlPlane = await kubeConfig(
    await cluster.mintUser(CONTROL_PLANE_USER, [
      'system:serviceaccounts',
      `system:serviceaccounts:${CONTROL_PLANE_ACCOUNT.namespace}`,
    ]),
  );
  return { asControlPlane, kubectl };
}

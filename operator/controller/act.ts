/**
 * act: runs a plan's actions in order and stops at the first failure. Every action is
 * safe to repeat (creates treat AlreadyExists and deletes treat NotFound as done), so a
 * pass that failed half-way is simply planned again.
 */
import type { Logger } from 'pino';
import type { Conversation } from '../api/v1alpha1/conversation-types';
import type { JournalRetention } from '../api/v1alpha1/conversation-values';
import { classifyCreateFailure } from './classify-create-failure';
import type { CreateFailure } from './classify-create-failure';
import type { ConversationKube } from './kube-client';
import { apiErrorMessage, apiFailureOf } from './kube-api-errors';
import type { Action } from './plan';
import { ActionKind } from './plan';
import type { ActOutcome } from './report';

/** What runs around an action, outside the cluster adapter. */
export interface ActHooks {
  /**
   * Before the finalizer comes off a deleted Conversation: releases what is kept for it
   * elsewhere (its Lease, in the control plane's namespace). Must be safe to repeat.
   */
  readonly beforeFinalizerRemoved?: (ref: {
    readonly namespace: string;
    readonly name: string;
    readonly uid: string;
    /** Its `spec.journalRetention` (undefined: the deployment's default). */
    readonly journalRetention: JournalRetention | undefined;
  }) => Promise<void>;
}

/** Runs `actions` against the cluster; never throws (a failure is in the outcome). */
export async function runActions(
  kube: ConversationKube,
  conversation: Conversation,
  actions: readonly Action[],
  log: Logger,
  hooks: ActHooks = {},
): Promise<ActOutcome & { readonly error?: unknown }> {
  const completed: Action[] = [];
  for (const action of actions) {
    try {
      await runAction(kube, conversation, action, hooks);
      log.info(
        { action: action.kind, ...('why' in action ? { why: action.why } : {}) },
        'action done',
      );
      completed.push(action);
    } catch (err: unknown) {
      const cause = causeOf(action, err);
      return {
        completed,
        failed: {
          action,
          message: apiErrorMessage(err),
          ...(cause.kind === 'other' ? {} : { cause }),
        },
        error: err,
      };
    }
  }
  return { completed };
}

async function runAction(
  kube: ConversationKube,
  conversation: Conversation,
  action: Action,
  hooks: ActHooks,
): Promise<void> {
  const namespace = conversation.metadata.namespace ?? '';
  switch (action.kind) {
    case ActionKind.AddFinalizer:
      return kube.addFinalizer(conversation);
    case ActionKind.RemoveFinalizer:
      // First what is kept elsewhere: once the finalizer is off, nothing calls this again.
      await hooks.beforeFinalizerRemoved?.({
        namespace,
        name: conversation.metadata.name ?? '',
        uid: conversation.metadata.uid ?? '',
        journalRetention: conversation.spec.journalRetention,
      });
      return kube.removeFinalizer(conversation);
    case ActionKind.CreateClaim:
      return kube.createClaim(action.claim);
    case ActionKind.DeleteClaim:
      return kube.deleteClaim(namespace, action.name, action.uid);
    case ActionKind.CreatePod:
      return kube.createPod(action.pod);
    case ActionKind.DeletePod:
      return kube.deletePod(namespace, action.name, action.uid);
    case ActionKind.DeleteConversation:
      return kube.deleteConversation(conversation);
  }
}

/** Why a create failed, when it is a cause `report` names on its own. */
function causeOf(action: Action, err: unknown): CreateFailure {
  if (action.kind !== ActionKind.CreatePod) return { kind: 'other' };
  return classifyCreateFailure(apiFailureOf(err), action.pod.spec.runtimeClassName);
}

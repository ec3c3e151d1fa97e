import { canonicalJson } from '../../common/canonical-json';
import { ToolEffect as ProtoToolEffect } from '../../proto/gen/polychrome/events/v1/events';
import {
  ToolHost as ProtoToolHost,
  type ToolSpec,
} from '../../proto/gen/polychrome/harness/v1/harness';
import { invalidField, jsonObjectField } from '../turn/proto-fields';
import { toolEffectFromProto, toolEffectToProto } from '../turn/step-codec';
import type { TurnTool } from '../turn/turn-records';

/**
 * Tools as `TurnStart` carries them (harness.v1 `ToolSpec`) to and from the turn loop's
 * tools: full specs, and tools named by reference that the harness defines itself or
 * finds on its MCP servers when the turn runs. A `fromProto` checks what proto3 cannot and
 * throws `invalid_argument` naming the field.
 */

/**
 * A tool `start` names by reference (an empty `input_schema_json`) whose definition the
 * harness finds only when the turn runs: what the spec adds is an approval requirement.
 */
export interface ToolReference {
  readonly name: string;
  readonly needsApproval: boolean;
  /** Empty on the wire: unset. */
  readonly approvalReason?: string;
}

/**
 * A turn tool to proto `ToolSpec`.
 *
 * @throws AppError `invalid_argument` when the input schema is not JSON-serializable.
 */
export function turnToolToProto(tool: TurnTool): ToolSpec {
  return {
    name: tool.name,
    description: tool.description,
    inputSchemaJson: canonicalJson(tool.inputSchema),
    effect: toolEffectToProto(tool.effect),
    needsApproval: tool.needsApproval,
    approvalReason: tool.approvalReason ?? '',
    host:
      tool.host === 'control_plane'
        ? ProtoToolHost.TOOL_HOST_CONTROL_PLANE
        : ProtoToolHost.TOOL_HOST_HARNESS,
  };
}

/** Tools the harness defines itself, found by name (built-in and reserved tools). */
export type ToolCatalog = (name: string) => TurnTool | undefined;

/**
 * Proto `ToolSpec` to a turn tool. An unspecified host means the harness. A spec with an
 * empty `input_schema_json` names a tool by reference: its definition comes from the
 * harness's `catalog`, and the spec can only add an approval requirement.
 *
 * @throws AppError `invalid_argument` for an empty name, a schema that is not a JSON
 *   object, an unspecified effect, or a reference to a tool the harness does not have.
 */
export function turnToolFromProto(
  spec: ToolSpec,
  field = 'tool',
  catalog: ToolCatalog = () => undefined,
): TurnTool {
  if (spec.name === '') throw invalidField(`${field}.name`, 'is empty');
  if (spec.inputSchemaJson === '') {
    const known = catalog(spec.name);
    if (known === undefined) {
      throw invalidField(
        `${field}.input_schema_json`,
        `is empty, and this harness has no tool named ${JSON.stringify(spec.name)} to take it from`,
      );
    }
    return {
      ...known,
      needsApproval: known.needsApproval || spec.needsApproval,
      ...(spec.approvalReason === '' ? {} : { approvalReason: spec.approvalReason }),
    };
  }
  let host: TurnTool['host'];
  switch (spec.host) {
    case ProtoToolHost.TOOL_HOST_UNSPECIFIED:
    case ProtoToolHost.TOOL_HOST_HARNESS:
      host = 'harness';
      break;
    case ProtoToolHost.TOOL_HOST_CONTROL_PLANE:
      host = 'control_plane';
      break;
    default:
      throw invalidField(`${field}.host`, 'is not a known tool host');
  }
  return {
    name: spec.name,
    description: spec.description,
    inputSchema: jsonObjectField(spec.inputSchemaJson, `${field}.input_schema_json`),
    effect: toolEffectFromProto(spec.effect, `${field}.effect`),
    needsApproval: spec.needsApproval,
    ...(spec.approvalReason === '' ? {} : { approvalReason: spec.approvalReason }),
    host,
  };
}

/** A tool reference to proto `ToolSpec` (by reference: empty schema, effect unspecified). */
export function toolReferenceToProto(reference: ToolReference): ToolSpec {
  return {
    name: reference.name,
    description: '',
    inputSchemaJson: '',
    effect: ProtoToolEffect.TOOL_EFFECT_UNSPECIFIED,
    needsApproval: reference.needsApproval,
    approvalReason: reference.approvalReason ?? '',
    host: ProtoToolHost.TOOL_HOST_HARNESS,
  };
}

/**
 * Tool specs to turn tools: full specs and the harness's own tools by reference become
 * tools; a reference the catalog lacks but `deferred` accepts (a tool of the harness's MCP
 * servers, known only once they are listed) becomes a {@link ToolReference}.
 *
 * @throws AppError `invalid_argument` as {@link turnToolFromProto}, naming `field[i]`.
 */
export function toolsFromProto(
  specs: readonly ToolSpec[],
  field: string,
  catalog: ToolCatalog,
  deferred: (name: string) => boolean,
): { tools: TurnTool[]; toolReferences: ToolReference[] } {
  const tools: TurnTool[] = [];
  const toolReferences: ToolReference[] = [];
  specs.forEach((spec, i) => {
    if (
      spec.inputSchemaJson === '' &&
      spec.name !== '' &&
      catalog(spec.name) === undefined &&
      deferred(spec.name)
    ) {
      toolReferences.push({
        name: spec.name,
        needsApproval: spec.needsApproval,
        ...(spec.approvalReason === '' ? {} : { approvalReason: spec.approvalReason }),
      });
    } else {
      tools.push(turnToolFromProto(spec, `${field}[${i}]`, catalog));
    }
  });
  return { tools, toolReferences };
}

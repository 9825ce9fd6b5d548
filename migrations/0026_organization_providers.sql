CREATE TABLE `organization_providers` (
	`name` text PRIMARY KEY NOT NULL,
	`organization_id` text NOT NULL,
	`config` text NOT NULL,
	`authorization` text,
	`enabled` integer NOT NULL,
	`created_at` integer NOT NULL,
	`updated_at` integer NOT NULL
);
--> statement-breakpoint
CREATE INDEX `organization_providers_organization_id_idx` ON `organization_providers` (`organization_id`,`name`);